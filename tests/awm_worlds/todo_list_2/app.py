import os
from typing import List

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from sqlalchemy import Boolean, Column, ForeignKey, Integer, String, create_engine
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "todo_list_2.db")
engine = create_engine(f"sqlite:///{DATABASE_PATH}", connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(autocommit=False, autoflush=False, bind=engine)
Base = declarative_base()


class Project(Base):
    __tablename__ = "projects"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, nullable=False)
    name = Column(String, nullable=False)


class Task(Base):
    __tablename__ = "tasks"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, nullable=False)
    project_id = Column(Integer, ForeignKey("projects.id"), nullable=False)
    title = Column(String, nullable=False)
    done = Column(Boolean, nullable=False, default=False)


Base.metadata.create_all(bind=engine)

app = FastAPI(title="Todo list")


class ProjectOut(BaseModel):
    id: int
    name: str


class TaskOut(BaseModel):
    id: int
    project_id: int
    title: str
    done: bool


class TaskIn(BaseModel):
    project_id: int
    title: str


@app.get("/projects", summary="List projects", description="The user's projects.", tags=["projects"],
         operation_id="list_projects", response_model=List[ProjectOut])
async def list_projects():
    db = SessionLocal()
    out = [ProjectOut(id=p.id, name=p.name) for p in db.query(Project).filter(Project.user_id == 1).all()]
    db.close()
    return out


@app.get("/projects/{project_id}/tasks", summary="List tasks", description="The tasks of one project.",
         tags=["tasks"], operation_id="list_tasks", response_model=List[TaskOut])
async def list_tasks(project_id: int, include_done: bool = True):
    db = SessionLocal()
    query = db.query(Task).filter(Task.user_id == 1, Task.project_id == project_id)
    if not include_done:
        query = query.filter(Task.done.is_(False))
    out = [TaskOut(id=t.id, project_id=t.project_id, title=t.title, done=t.done) for t in query.all()]
    db.close()
    return out


@app.post("/tasks", summary="Add a task", description="Add a task to a project.", tags=["tasks"],
          operation_id="create_task", response_model=TaskOut)
async def create_task(task: TaskIn):
    db = SessionLocal()
    row = Task(user_id=1, project_id=task.project_id, title=task.title, done=False)
    db.add(row)
    db.commit()
    out = TaskOut(id=row.id, project_id=row.project_id, title=row.title, done=row.done)
    db.close()
    return out


@app.post("/tasks/{task_id}/complete", summary="Complete a task", description="Mark a task as done.",
          tags=["tasks"], operation_id="complete_task", response_model=TaskOut)
async def complete_task(task_id: int):
    db = SessionLocal()
    row = db.query(Task).filter(Task.id == task_id, Task.user_id == 1).first()
    row.done = True
    db.commit()
    out = TaskOut(id=row.id, project_id=row.project_id, title=row.title, done=row.done)
    db.close()
    return out


if __name__ == "__main__":
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8001")))
