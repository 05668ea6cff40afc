from __future__ import annotations

import os
from typing import List, Optional

import uvicorn
from fastapi import FastAPI, Path, Query
from pydantic import BaseModel, Field
from sqlalchemy import Boolean, Column, ForeignKey, Integer, String, create_engine, event
from sqlalchemy.orm import declarative_base, sessionmaker


def build_engine(path: str):
    url = path if "://" in path else f"sqlite:///{path}"
    return create_engine(url, connect_args={"check_same_thread": False}, pool_pre_ping=True)


db_engine = build_engine(os.environ.get("DATABASE_PATH", "library_loans.db"))


@event.listens_for(db_engine, "connect")
def enable_foreign_keys(dbapi_connection, connection_record):
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


DBSession = sessionmaker(autocommit=False, autoflush=False, bind=db_engine)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False)


class Book(Base):
    __tablename__ = "books"
    id = Column(Integer, primary_key=True)
    title = Column(String, nullable=False)
    author = Column(String, nullable=False)
    available = Column(Boolean, nullable=False, default=True)


class Loan(Base):
    __tablename__ = "loans"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    book_id = Column(Integer, ForeignKey("books.id"), nullable=False)
    returned = Column(Boolean, nullable=False, default=False)


class Review(Base):
    __tablename__ = "reviews"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    book_id = Column(Integer, ForeignKey("books.id"), nullable=False)
    stars = Column(Integer, nullable=False)
    text = Column(String, nullable=False)
    tags = Column(String, nullable=False, default="")


Base.metadata.create_all(bind=db_engine)

app = FastAPI(title="Library Loans (an engine from a helper)")


class ReviewCreateRequest(BaseModel):
    book_id: int = Field(..., description="The book to review")
    stars: int = Field(..., ge=1, le=5, description="From 1 to 5")
    text: str = Field(..., description="The review")
    tags: Optional[List[ReviewTag]] = Field(None, description="Tags for the review")


class ReviewTag(BaseModel):
    name: str


class ReviewOut(BaseModel):
    id: int
    book_id: int
    stars: int
    text: str


class BorrowRequest(BaseModel):
    book_id: int


class BookOut(BaseModel):
    id: int
    title: str
    author: str
    available: bool


class LoanOut(BaseModel):
    id: int
    book_id: int
    returned: bool


@app.get("/books", summary="Search books", description="List books, optionally by author.", tags=["books"],
         operation_id="search_books", response_model=List[BookOut])
async def search_books(author: Optional[str] = Query(None, description="Author name")):
    db = DBSession()
    query = db.query(Book)
    if author:
        query = query.filter(Book.author == author)
    books = [BookOut(id=b.id, title=b.title, author=b.author, available=b.available) for b in query.all()]
    db.close()
    return books


@app.post("/loans", summary="Borrow a book", description="Borrow an available book.", tags=["loans"],
          operation_id="borrow_book", response_model=LoanOut)
async def borrow_book(body: BorrowRequest):
    db = DBSession()
    book = db.query(Book).filter(Book.id == body.book_id).first()
    book.available = False
    loan = Loan(user_id=1, book_id=body.book_id, returned=False)
    db.add(loan)
    db.commit()
    out = LoanOut(id=loan.id, book_id=loan.book_id, returned=loan.returned)
    db.close()
    return out


@app.post("/loans/{loan_id}/return", summary="Return a book", description="Return a borrowed book.",
          tags=["loans"], operation_id="return_book", response_model=LoanOut)
async def return_book(loan_id: int = Path(..., description="The loan")):
    db = DBSession()
    loan = db.query(Loan).filter(Loan.id == loan_id, Loan.user_id == 1).first()
    loan.returned = True
    db.query(Book).filter(Book.id == loan.book_id).first().available = True
    db.commit()
    out = LoanOut(id=loan.id, book_id=loan.book_id, returned=loan.returned)
    db.close()
    return out


@app.post("/reviews", summary="Review a book", description="Write a review of a book.", tags=["reviews"],
          operation_id="create_review", response_model=ReviewOut)
async def create_review(request: ReviewCreateRequest):
    db = DBSession()
    tags = ",".join(tag.name for tag in request.tags or [])
    review = Review(user_id=1, book_id=request.book_id, stars=request.stars, text=request.text, tags=tags)
    db.add(review)
    db.commit()
    out = ReviewOut(id=review.id, book_id=review.book_id, stars=review.stars, text=review.text)
    db.close()
    return out


if __name__ == "__main__":
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8000")))
